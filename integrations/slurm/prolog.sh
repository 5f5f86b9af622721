#!/bin/sh
# PrologSlurmctld for mlroute: declares the job by its members (SLURM_JOB_NODELIST).
#   slurm.conf:  PrologSlurmctld=/path/to/mlroute/integrations/slurm/prolog.sh
# Settings (Slurm runs this with no PATH and a bare environment): /etc/mlroute/slurm.env, a
# shell file read here if present, e.g.
#   MLROUTE_URL=http://10.1.0.5:8080   MLROUTE_TOKEN_FILE=/etc/mlroute/token
#   MLROUTE_HOST_MAP=/etc/mlroute/hosts   MLROUTE_PYTHON=/opt/mlroute/.venv/bin/python
# Always exits 0: a failing PrologSlurmctld would requeue or cancel the job; errors go to stderr
# and to MLROUTE_SLURM_LOG (see controller/integrations/slurm.py).
PATH=/usr/local/bin:/usr/bin:/bin
MLROUTE_ENV=${MLROUTE_ENV:-/etc/mlroute/slurm.env}
if [ -r "$MLROUTE_ENV" ]; then set -a; . "$MLROUTE_ENV"; set +a; fi
REPO=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
PY=${MLROUTE_PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
T=; command -v timeout >/dev/null && T="timeout -k 5 60"   # a last bound, beyond the hook's own deadline
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" $T "$PY" -m controller.integrations.slurm prolog "$@"
exit 0
