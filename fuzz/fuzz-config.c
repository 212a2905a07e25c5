/*
 * fuzz-config.c: the config loader (config.c) on one spur.yaml. Secrets named
 * env:FUZZ_SECRET resolve; other references fail as they would for a user.
 */
#include "spur.h"
#include "conf.h"
#include "ytree.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char		*file;
	struct config		*conf;
	struct yerrs		 errs;
	const struct secret	*secrets[64];
	size_t			 i;

	if (file == NULL) {
		file = path_join(fuzz_tmpdir(), "spur.yaml");
		setenv("FUZZ_SECRET", "fuzz-secret-value", 1);
	}
	fuzz_write_file(file, data, size);
	yerrs_init(&errs);
	conf = config_load(file, 0, &errs);
	if (conf == NULL && errs.n == 0)
		abort();	/* refused without saying why */
	for (i = 0; i < errs.n; i++) {
		if (strstr(errs.msgs[i], "fuzz-secret-value") != NULL &&
		    memmem(data, size, "fuzz-secret-value", 17) == NULL)
			abort();	/* an error quoting a secret would be printed */
	}
	if (conf != NULL) {
		for (i = 0; i < conf->norgs; i++) {
			(void)config_org(conf, conf->orgs[i].name);
			(void)org_secret(&conf->orgs[i], "FUZZ");
			(void)org_agent_key(&conf->orgs[i], "claude");
		}
		(void)config_agent(conf, "claude");
		(void)config_secrets(conf, secrets, SPUR_ARRLEN(secrets));
		config_free(conf);
	}
	yerrs_free(&errs);
	return 0;
}
