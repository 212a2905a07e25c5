"""What the several-node tests share (test_nodes, test_nodes_live): a real PostgreSQL server
(pgserver.py; the suite is skipped, saying why, where none can start), the fake forge, and the
org whose deliveries and reports go through it."""
import time

from spurtest import SECRETS, tempdir
from fakeapis import Fake
from pgserver import PgServer


def start(t):
    """(pg, fake, the orgs: section of a node's config)."""
    pg = PgServer()
    why = pg.start()
    if why is not None:
        t.skip_all("no PostgreSQL server here: %s" % why)
    fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"],
                tempdir("spur-git-")).any_repository()
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n"
            "      token: env:T_GH_TOKEN\n      api_url: %(u)s\n      git_url: %(u)s/git\n" % {"u": fake.url})
    return pg, fake, orgs


def wait(pred, timeout, every=0.2):
    """pred()'s first true answer within timeout seconds, or its last answer."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    return pred()
