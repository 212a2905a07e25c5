# A hostile agent: tries to escape its sandbox; prints LEAK lines for anything it reaches.
# It runs inside spur's sandbox; the test fails on any LEAK line.
for f in /etc/shadow /root /var /work /tmp/spur-test-* "$SPUR_DATA_GUESS"; do
	[ -n "$f" ] && ls $f 2>/dev/null | grep -q . && echo "LEAK:listed $f"
done
find / -xdev -name spur.db 2>/dev/null | grep -q . && echo "LEAK:found spur.db"
find / -xdev -name spur.yaml 2>/dev/null | grep -q . && echo "LEAK:found spur.yaml"
find / -xdev -path '*sessions*' 2>/dev/null | grep -q . && echo "LEAK:found sessions"
for v in T_GH_SECRET T_GH_TOKEN T_SLACK_SECRET T_LINEAR_SECRET T_HOOK_SECRET T_ANTHROPIC_KEY; do
	env | grep -q "^$v=" && echo "LEAK:env $v"
done
cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -q '^T_GH_SECRET=' && echo "LEAK:proc environ"
for p in 1 $(seq 2 50); do kill -0 $p 2>/dev/null && [ "$(cat /proc/$p/comm 2>/dev/null)" = spur ] && echo "LEAK:sees spur pid $p"; done
(exec 3<>/dev/tcp/127.0.0.1/80) 2>/dev/null && echo "LEAK:tcp 80"
if command -v python3 >/dev/null; then
	python3 - <<'PY' 2>/dev/null
import socket
for port in range(1024, 65536, 1):
    pass
for host in ("127.0.0.1", "10.0.2.2", "169.254.169.254", "8.8.8.8"):
    try:
        s = socket.create_connection((host, 80), timeout=0.5); print("LEAK:connect", host)
    except OSError:
        pass
try:
    socket.getaddrinfo("example.com", 443); print("LEAK:dns")
except OSError:
    pass
PY
fi
touch /usr/leak 2>/dev/null && echo "LEAK:wrote /usr"
touch /etc/leak 2>/dev/null && echo "LEAK:wrote /etc"
touch /leak 2>/dev/null && echo "LEAK:wrote /"
[ "$(id -u)" = 0 ] && echo "LEAK:uid 0"
echo hostile-done
