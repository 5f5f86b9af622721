#!/bin/sh
# What PrologSlurmctld (prolog.sh) and EpilogSlurmctld (epilog.sh) share: run
# `python -m controller.integrations.slurm prolog|epilog` with the settings of
# /etc/mlroute/slurm.env, a shell file read here if present, e.g.
#   MLROUTE_URL=http://10.1.0.5:8080   MLROUTE_TOKEN_FILE=/etc/mlroute/token
#   MLROUTE_HOST_MAP=/etc/mlroute/hosts   MLROUTE_PYTHON=/opt/mlroute/.venv/bin/python
# Slurm runs hooks with no PATH and a bare environment. Always exits 0: a failing
# PrologSlurmctld would requeue or cancel the job, and Slurm must never wait on mlroute;
# errors go to stderr and to MLROUTE_SLURM_LOG (see controller/integrations/slurm.py).
HOOK=$1
shift
PATH=/usr/local/bin:/usr/bin:/bin
MLROUTE_ENV=${MLROUTE_ENV:-/etc/mlroute/slurm.env}
if [ -r "$MLROUTE_ENV" ]; then set -a; . "$MLROUTE_ENV"; set +a; fi
REPO=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
PY=${MLROUTE_PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
T=; command -v timeout >/dev/null && T="timeout -k 5 60"   # a last bound, beyond the hook's own deadline
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" $T "$PY" -m controller.integrations.slurm "$HOOK" "$@"
exit 0
