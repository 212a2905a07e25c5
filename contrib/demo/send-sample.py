"""Signs a sample payload the Standard Webhooks way with $DEMO_DEPLOY_HOOK_SECRET and posts it."""
import base64
import hashlib
import hmac
import os
import sys
import time
import urllib.request
import uuid

base, path = sys.argv[1], sys.argv[2]
body = open(path, "rb").read()
secret = os.environ["DEMO_DEPLOY_HOOK_SECRET"]
key = base64.b64decode(secret[len("whsec_"):])
msg_id = "msg_" + uuid.uuid4().hex
ts = str(int(time.time()))
sig = base64.b64encode(hmac.new(key, ("%s.%s." % (msg_id, ts)).encode() + body, hashlib.sha256).digest()).decode()
req = urllib.request.Request(base + "/o/demo/hooks/deploy-failed", data=body, method="POST", headers={
    "Content-Type": "application/json", "webhook-id": msg_id, "webhook-timestamp": ts,
    "webhook-signature": "v1," + sig})
with urllib.request.urlopen(req, timeout=30) as r:
    print(r.read().decode())
