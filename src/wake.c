/* wake.c: the engine's wake bus: modules post what should look again, its owner acts. */
#include "spur.h"
#include "serve.h"
#include "wake.h"

void
wake_subscribe(struct engine *e, unsigned what, wake_cb cb, void *arg)
{
	int	 i;

	for (i = 0; i < WAKE_NKINDS; i++) {
		if (what & (1u << i)) {
			e->wakes[i].cb = cb;
			e->wakes[i].arg = arg;
		}
	}
}

void
wake(struct engine *e, unsigned what)
{
	int	 i;

	for (i = 0; i < WAKE_NKINDS; i++) {
		if ((what & (1u << i)) && e->wakes[i].cb != NULL)
			e->wakes[i].cb(e->wakes[i].arg);
	}
}
