/*
 * A test double of pyxis (NVIDIA's SPANK plugin for containers in Slurm steps), for the test cluster only
 * (tests/slurm/cluster.py builds it and names it in the bed's plugstack.conf).
 *
 * It registers pyxis's srun options with pyxis's names and arguments (--container-image, --container-mounts,
 * --container-workdir, --container-name, --[no-]container-entrypoint, --[no-]container-mount-home,
 * --container-writable / --container-readonly, --container-env), so that real srun accepts, or refuses, the
 * command lines trtsweep generates; refuses an empty argument as pyxis does; and, in each task of a step that asked
 * for an image, appends one tab-separated line to the file its plugstack.conf line names:
 *     <job id> <step id> <image> <mounts> <workdir> <entrypoint: 0 | 1 | -1 unset> <the task's pid>
 * and enters the working directory. No container is made: the task runs on the node as it is (the image's contents
 * are the container runtime's business, tested with the dockerd of tests/container).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis_double, 1);

static char *image, *mounts, *workdir;
static int entrypoint = -1;

static int keep(char **slot, const char *arg, const char *flag)
{
	if (arg == NULL || *arg == '\0') {
		slurm_error("pyxis: --%s: argument required", flag);
		return -1;
	}
	free(*slot);
	*slot = strdup(arg);
	return 0;
}

static int opt_image(int val, const char *arg, int remote) { return keep(&image, arg, "container-image"); }
static int opt_mounts(int val, const char *arg, int remote) { return keep(&mounts, arg, "container-mounts"); }
static int opt_workdir(int val, const char *arg, int remote) { return keep(&workdir, arg, "container-workdir"); }
static int opt_text(int val, const char *arg, int remote)
{
	if (arg == NULL || *arg == '\0') {
		slurm_error("pyxis: argument required");
		return -1;
	}
	return 0;
}
static int opt_entrypoint(int val, const char *arg, int remote)
{
	entrypoint = val;
	return 0;
}
static int opt_flag(int val, const char *arg, int remote) { return 0; }

struct spank_option spank_options[] = {
	{"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[pyxis double] image", 1, 0, opt_image},
	{"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis double] bind mounts", 1, 0, opt_mounts},
	{"container-workdir", "PATH", "[pyxis double] working directory", 1, 0, opt_workdir},
	{"container-name", "NAME", "[pyxis double] container name", 1, 0, opt_text},
	{"container-env", "NAME[,NAME...]", "[pyxis double] variables", 1, 0, opt_text},
	{"container-entrypoint", NULL, "[pyxis double] run the entrypoint", 0, 1, opt_entrypoint},
	{"no-container-entrypoint", NULL, "[pyxis double] skip the entrypoint", 0, 0, opt_entrypoint},
	{"container-mount-home", NULL, "[pyxis double] mount home", 0, 1, opt_flag},
	{"no-container-mount-home", NULL, "[pyxis double] no home", 0, 0, opt_flag},
	{"container-writable", NULL, "[pyxis double] writable", 0, 1, opt_flag},
	{"container-readonly", NULL, "[pyxis double] read-only", 0, 0, opt_flag},
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	FILE *log;

	if (image == NULL || ac < 1)
		return 0;
	spank_get_item(sp, S_JOB_ID, &job);
	spank_get_item(sp, S_JOB_STEPID, &step);
	log = fopen(av[0], "a");
	if (log == NULL) {
		slurm_error("pyxis double: cannot open %s", av[0]);
		return -1;
	}
	fprintf(log, "%u\t%u\t%s\t%s\t%s\t%d\t%d\n", job, step, image, mounts ? mounts : "", workdir ? workdir : "",
		entrypoint, (int)getpid());
	fclose(log);
	if (workdir != NULL && chdir(workdir) != 0) {
		slurm_error("pyxis double: cannot enter %s", workdir);
		return -1;
	}
	return 0;
}
