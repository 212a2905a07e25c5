/* fold.c: compatibility folding and confusables, written out as ranges of the letters they imitate. */

#include "spur.h"
#include "fold.h"

#include <string.h>

/*
 * Each range maps cp to map[(cp - lo) % strlen(map)]; "." is no letter. A
 * map as long as its range spells each character out (accented Latin,
 * Greek and Cyrillic look-alikes, Cherokee, Lisu, small capitals, modifier
 * letters, letterlike symbols); a shorter one repeats (fullwidth, circled,
 * parenthesized and squared letters, and the thirteen alphabets of
 * mathematical letters at U+1D400, which repeat A..Z a..z). The letters are
 * NFKD with the combining marks dropped, plus the look-alikes that Unicode's
 * confusables pair with a Latin letter. Sorted by lo, not overlapping.
 */
static const struct fold_range {
	uint32_t	 lo;
	uint32_t	 hi;
	const char	*map;
} fold_ranges[] = {
	{ 0x00aa, 0x02b8,
	    "a.......23.u...1o.....aaaaaa.ceeeeiiiidnooooo.ouuuuy..aaaaaa.cee"
	    "eeiiiidnooooo.ouuuuy.yaaaaaaccccccccddddeeeeeeeeeegggggggghhhhii"
	    "iiiiiiii..jjkkkllllllllllnnnnnnnnnoooooo..rrrrrrssssssssttttttuu"
	    "uuuuuuuuuuwwyyyzzzzzzsbbbb...ccdddd....ffg..iikkl..nnooo..ppr..."
	    ".ttttuu.vyyzz.........l............aaiioouuuuuuuuuu.aaaa..ggggkk"
	    "oooo..j...gg..nnaa..ooaaaaeeeeiiiioooorrrruuuusstt..hhnd..zzaaee"
	    "ooooooooyylntj..accltsz..bu.eejjqqrryy.a.b.cdd........ggg...h.i."
	    "illl...mnnno......rr..r.s.....tu.v...yzz.......b.ghj.lq........."
	    "......hhjr...wy" },
	{ 0x02e1, 0x02e3, "lsx" },
	{ 0x037f, 0x0477,
	    "j......a.ehi.o.y.iab..ezh.ik.mn.o.p..ty.x..iyaeniuaby.e.n.ik.uv."
	    "o.p..tu.x.wiuouwkb.yyy.......f...................kpcj.e...cm.p.."
	    ".ee..esiij...k.y.a.b..e....k.mho.pcty.x......b...a..r.e....k.m.o"
	    "npcty.x......b...ee.resiij...k.y.ww..................vvvv" },
	{ 0x049a, 0x0501,
	    "kk..................yyyyxx......hh....i..............laaaa..ee.."
	    "............oooooo..yyyyyy............dd" },
	{ 0x051a, 0x051d, "qqww" },
	{ 0x054d, 0x0585,
	    "u.s.....o................q.........h.......n....u...g..po" },
	{ 0x13a0, 0x13fc,
	    "drt..i...yaje......w...m...h.y..g.hz...........b..r.ws...vs...lc"
	    "..p...kd............b.......b" },
	{ 0x1d00, 0x1d6a,
	    "a.bcdde..ijklmno.o.o....prrtu...vwz......p..a.b.de.ghijklmn.o.pr"
	    "tuwa.abbde...g.kmno...ptu..v.by..xiruvbyp.x" },
	{ 0x1d9c, 0x1dbd, "ccd.f.g.i.i.jl.lm.nnno.s.tu.uv.zzz" },
	{ 0x1e00, 0x1ff9,
	    "aabbbbbbccddddddddddeeeeeeeeeeffgghhhhhhhhhhiiiikkkkkkllllllllmm"
	    "mmmmnnnnnnnnoooooooopppprrrrrrrrssssssssssttttttttuuuuuuuuuuvvvv"
	    "wwwwwwwwwwxxxxyyzzzzzzhtwy.s....aaaaaaaaaaaaaaaaaaaaaaaaeeeeeeee"
	    "eeeeeeeeiiiioooooooooooooooooooooooouuuuuuuuuuuuuuyyyyyyyy......"
	    "aaaaaaaaaaaaaaaaeeeeee..eeeeee..nnnnnnnnhhhhhhhhiiiiiiiiiiiiiiii"
	    "oooooo..oooooo..uuuuuuuu.y.y.y.ywwwwwwww........aaeenniioouuww.."
	    "aaaaaaaaaaaaaaaannnnnnnnhhhhhhhhwwwwwwww........aaaaa.aaaaaaa.i."
	    "..nnn.nneehhh...iiii..iiiiii....uuuuppuuyyyyp.....www.wwoo" },
	{ 0x2070, 0x209c,
	    "0i..456789.....n0123456789......aeox.hklmnpst" },
	{ 0x2102, 0x2149,
	    "c.......ghhhhhiill.n...pqrrr......z...z.kabc.eef.mo....i...y...."
	    "...ddeij" },
	{ 0x2160, 0x217f, "i...v....x..lcdmi...v....x..lcdm" },
	{ 0x2460, 0x2490,
	    "123456789...........123456789...........123456789" },
	{ 0x249c, 0x24e9, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x24ea, 0x24ea, "0" },
	{ 0x2c7c, 0x2c7d, "jv" },
	{ 0xa4d0, 0xa4f7, "bppdttgkkjcczffmnlsrryvh..wxy.aaeeiouuld" },
	{ 0xa69d, 0xa69d, "b" },
	{ 0xa730, 0xa731, "fs" },
	{ 0xa7f2, 0xa7f8, "cfq...h" },
	{ 0xab5e, 0xabb7,
	    "l.................drt..i...yaje......w...m...h.y..g.hz.........."
	    ".b..r.ws...vs...lc..p...kd" },
	{ 0xff10, 0xff19, "0123456789" },
	{ 0xff21, 0xff3a, "abcdefghijklmnopqrstuvwxyz" },
	{ 0xff41, 0xff5a, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x10784, 0x107b6,
	    "bb.....dd.....ggghh....l......o..q..r.r....t..y...l" },
	{ 0x1d400, 0x1d6a3, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1d6a4, 0x1d6a5, "ij" },
	{ 0x1d6a8, 0x1d7c9,
	    "ab..ezh.ik.mn.o.p..ty.x...aby.e.n.ik.uv.o.p..tu.x.w.e.k.p." },
	{ 0x1d7ca, 0x1d7ca, "f" },
	{ 0x1d7ce, 0x1d7ff, "0123456789" },
	{ 0x1f100, 0x1f100, "0" },
	{ 0x1f101, 0x1f10a, "0123456789" },
	{ 0x1f110, 0x1f129, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1f12b, 0x1f12c, "cr" },
	{ 0x1f130, 0x1f149, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1f150, 0x1f169, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1f170, 0x1f189, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1f1e6, 0x1f1ff, "abcdefghijklmnopqrstuvwxyz" },
	{ 0x1fbf0, 0x1fbf9, "0123456789" },
};

/* Characters read as several letters (NFKC), those of them that can begin or end "spur" or "data". */
static const struct {
	uint32_t	 cp;
	const char	*to;
} fold_multi[] = {
	{ 0x20a8, "rs" }, { 0x2100, "ac" }, { 0x2101, "as" }, { 0x3372, "da" },
	{ 0x3373, "au" }, { 0x33a7, "ms" }, { 0x33ae, "rads" }, { 0x33b0, "ps" },
	{ 0x33b1, "ns" }, { 0x33b3, "ms" }, { 0x33c2, "am" }, { 0x33df, "am" },
	{ 0x1f14d, "ss" },
};

size_t
fold_char(uint32_t cp, char *out)
{
	const struct fold_range	*r;
	size_t			 lo = 0, hi = SPUR_ARRLEN(fold_ranges), mid, i;
	char			 c;

	if (cp < 0x80) {
		if (cp >= 'A' && cp <= 'Z')
			cp += 'a' - 'A';
		if ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9')) {
			out[0] = (char)cp;
			return 1;
		}
		return 0;
	}
	for (i = 0; i < SPUR_ARRLEN(fold_multi); i++) {
		if (fold_multi[i].cp == cp) {
			memcpy(out, fold_multi[i].to, strlen(fold_multi[i].to));
			return strlen(fold_multi[i].to);
		}
	}
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		r = &fold_ranges[mid];
		if (cp < r->lo)
			hi = mid;
		else if (cp > r->hi)
			lo = mid + 1;
		else {
			c = r->map[(cp - r->lo) % strlen(r->map)];
			if (c == '.')
				return 0;
			out[0] = c;
			return 1;
		}
	}
	return 0;
}
