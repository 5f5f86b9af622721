#!/bin/sh
# PrologSlurmctld for mlroute: declares the job by its members (SLURM_JOB_NODELIST).
#   slurm.conf:  PrologSlurmctld=/path/to/mlroute/integrations/slurm/prolog.sh
# Settings and exit status: hook.sh.
exec "$(dirname -- "$0")/hook.sh" prolog "$@"
