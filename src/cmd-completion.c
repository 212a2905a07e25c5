/*
 * cmd-completion.c: `spur completion bash|zsh|fish`: a shell's completion of
 * spur's commands, their subcommands (build|list|rm) and their options, made
 * from the command table's usage lines, so it never drifts from them.
 */
#include "spur.h"
#include "cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options a usage line names ("--json", "-c"), and its subcommands (the "a|b|c" word). */
static void
completion_words(const char *usage, struct buf *opts, struct buf *subs)
{
	const char	*p = usage, *w;
	size_t		 n;

	while (*p != '\0') {
		while (*p != '\0' && strchr(" [", *p) != NULL)
			p++;
		w = p;
		while (*p != '\0' && (isalnum((unsigned char)*p) || strchr("-_|", *p) != NULL))
			p++;
		n = (size_t)(p - w);
		if (n > 1 && w[0] == '-')
			buf_addf(opts, "%s%.*s", opts->len > 0 ? " " : "", (int)n, w);
		else if (w == usage && memchr(w, '|', n) != NULL) {
			for (; n > 0; w++, n--)
				buf_addc(subs, *w == '|' ? ' ' : *w);
		}
		if (p == w && *p != '\0')
			p++;	/* a character no word has (']', '.', a quote) */
	}
	if (strstr(usage, "-c FILE") != NULL)
		buf_adds(opts, " --config");
}

static void
completion_bash(const struct cmd *cmds, size_t n)
{
	struct buf	 opts, subs;
	size_t		 i;

	printf("# spur(1) completion for bash: source <(spur completion bash)\n"
	    "_spur() {\n"
	    "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	    "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W \"");
	for (i = 0; i < n; i++)
		printf("%s%s", i > 0 ? " " : "", cmds[i].name);
	printf("\" -- \"$cur\"))\n\t\treturn\n\tfi\n"
	    "\tcase \"$prev\" in\n\t-c|--config) COMPREPLY=($(compgen -f -- \"$cur\")); "
	    "return ;;\n\tesac\n\tcase \"${COMP_WORDS[1]}\" in\n");
	for (i = 0; i < n; i++) {
		buf_init(&opts, 0);
		buf_init(&subs, 0);
		completion_words(cmds[i].usage, &opts, &subs);
		if (subs.len > 0)
			printf("\t%s) if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W "
			    "\"%s\" -- \"$cur\")); else COMPREPLY=($(compgen -W \"%s\" -- "
			    "\"$cur\")); fi ;;\n", cmds[i].name, buf_cstr(&subs), buf_cstr(&opts));
		else
			printf("\t%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")) ;;\n",
			    cmds[i].name, buf_cstr(&opts));
		buf_free(&opts);
		buf_free(&subs);
	}
	printf("\tesac\n}\ncomplete -F _spur spur\n");
}

static void
completion_fish(const struct cmd *cmds, size_t n)
{
	struct buf	 opts, subs;
	const char	*p, *e;
	size_t		 i;

	printf("# spur(1) completion for fish: spur completion fish | source\n"
	    "complete -c spur -f\n");
	for (i = 0; i < n; i++)
		printf("complete -c spur -n __fish_use_subcommand -a %s\n", cmds[i].name);
	for (i = 0; i < n; i++) {
		buf_init(&opts, 0);
		buf_init(&subs, 0);
		completion_words(cmds[i].usage, &opts, &subs);
		if (subs.len > 0)
			printf("complete -c spur -n '__fish_seen_subcommand_from %s' -a '%s'\n",
			    cmds[i].name, buf_cstr(&subs));
		for (p = buf_cstr(&opts); *p != '\0'; p = *e != '\0' ? e + 1 : e) {
			e = p + strcspn(p, " ");
			printf("complete -c spur -n '__fish_seen_subcommand_from %s' %s %.*s%s\n",
			    cmds[i].name, p[1] == '-' ? "-l" : "-s", (int)(e - p) - (p[1] == '-' ?
			    2 : 1), p + (p[1] == '-' ? 2 : 1), strncmp(p, "--config", 8) == 0 ||
			    strncmp(p, "-c", 2) == 0 ? " -r -F" : "");
		}
		buf_free(&opts);
		buf_free(&subs);
	}
}

int
cmd_completion(const struct cmd *c, int argc, char **argv)
{
	const struct cmd	*cmds;
	size_t			 n;

	if (argc != 2 || (strcmp(argv[1], "bash") != 0 && strcmp(argv[1], "zsh") != 0 &&
	    strcmp(argv[1], "fish") != 0)) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	cmds = cmd_table(&n);
	if (strcmp(argv[1], "fish") == 0)
		completion_fish(cmds, n);
	else {
		/* zsh completes with bash's function, through its bashcompinit. */
		if (strcmp(argv[1], "zsh") == 0)
			printf("#compdef spur\nautoload -U +X bashcompinit && bashcompinit\n");
		completion_bash(cmds, n);
	}
	return EXIT_OK;
}
