#!/bin/sh
# EpilogSlurmctld for mlroute: removes the job.
#   slurm.conf:  EpilogSlurmctld=/path/to/mlroute/integrations/slurm/epilog.sh
# Settings and exit status: hook.sh.
exec "$(dirname -- "$0")/hook.sh" epilog "$@"
