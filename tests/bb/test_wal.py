"""The store's WAL behind a long reader (a backup, say): it grows while the reader holds it, every
delivery still answered, and is cut back once the reader is gone (SPEC 10). Sizes, not times: it
runs beside the other suites (test_soak.py, which times, runs alone)."""
import json
import os
import sqlite3
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, github_headers, github_comment

MiB = 1 << 20
t = Tap()

# A long reader (a backup, say) keeps the WAL from being checkpointed and restarted: it grows
# with every commit meanwhile. Once the reader is gone, it is cut back to 16 MiB, not kept at
# its largest for good.
with Spur() as s:
    s.start()
    wal = os.path.join(s.data_dir, "spur.db-wal")
    reader = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchall()

    def post_until(limit, base):
        i = base
        while os.path.getsize(wal) <= limit:
            b = json.dumps(github_comment("held back " + "w" * 2000, comment_id=i)).encode()
            st, _, _ = s.post_json("/o/acme/hooks/github", b, github_headers(b, delivery="wal-%d" % i))
            if st != 200:
                return i, st
            i += 1
        return i, 200
    threads, ends = [], []
    for k in range(4):
        th = threading.Thread(target=lambda k=k: ends.append(post_until(24 * MiB, 1000000 * (k + 1))))
        threads.append(th)
        th.start()
    for th in threads:
        th.join()
    grown = os.path.getsize(wal)
    t.ok(grown > 24 * MiB and all(e[1] == 200 for e in ends), "with a reader holding the store, the WAL grew to "
         "%d KiB, every delivery answered 200" % (grown // 1024))
    reader.execute("COMMIT")
    reader.close()
    for i in range(300):
        b = json.dumps(github_comment("after the reader", comment_id=9000000 + i)).encode()
        s.post_json("/o/acme/hooks/github", b, github_headers(b, delivery="after-%d" % i))
    t.ok(os.path.getsize(wal) <= 16 * MiB, "once it is gone, the WAL is cut back to at most 16 MiB (%d KiB)"
         % (os.path.getsize(wal) // 1024))
    t.eq(s.stop(), 0, "and the engine stops cleanly")

t.done()
