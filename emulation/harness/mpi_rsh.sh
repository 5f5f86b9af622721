#!/bin/sh
# Open MPI's remote-start agent for Mininet (mpirun --mca plm_rsh_agent THIS): runs the command
# mpirun gives for host NAME inside that Mininet host's network namespace instead of over ssh.
# Called as ssh would be: [options] NAME COMMAND...; NAME is looked up in the file named by
# MLROUTE_MPI_HOSTMAP (lines "NAME PID", PID a process in the host's namespaces, as Mininet's
# host.pid), written by emulation/harness/collectives.py.
set -eu
while [ $# -gt 0 ]; do
    case "$1" in
        -x|-q|-n|-T|-t) shift ;;
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "mpi_rsh.sh: usage: mpi_rsh.sh HOST COMMAND..." >&2
    exit 2
fi
host=$1
shift
: "${MLROUTE_MPI_HOSTMAP:?mpi_rsh.sh: MLROUTE_MPI_HOSTMAP is not set}"
pid=$(awk -v h="$host" '$1 == h { print $2; exit }' "$MLROUTE_MPI_HOSTMAP")
if [ -z "$pid" ]; then
    echo "mpi_rsh.sh: host $host is not in $MLROUTE_MPI_HOSTMAP" >&2
    exit 2
fi
# Mininet hosts share the machine's host name and /tmp: eight daemons creating Open MPI's
# session directory (/tmp/ompi.HOSTNAME.UID/jf.N) at once sometimes failed ("File exists") and
# the launch stalled. Each host gets a folder of its own.
tmp="${TMPDIR:-/tmp}/mlroute-mpi-$host"
mkdir -p "$tmp"
exec mnexec -a "$pid" env TMPDIR="$tmp" /bin/sh -c "$*"
