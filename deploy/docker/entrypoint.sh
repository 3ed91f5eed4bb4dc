#!/bin/sh
# Entrypoint of the dpp image: the first argument picks the program.
#   master ARGS...  -> dpp-master ARGS...
#   worker ARGS...  -> dpp-worker ARGS...
#   ctl ARGS...     -> dppctl ARGS...      (also: dppctl ARGS...)
#   gen ARGS...     -> dpp-gen ARGS...
#   anything else   -> run as a command (e.g. sh)
# exec: the program replaces this shell, so it gets the signals (SIGTERM
# drains a worker) and its exit status is the container's.
set -eu
if [ $# -eq 0 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
    cat <<'USAGE'
usage: docker run IMAGE master|worker|ctl|gen [ARGS...]
  master  dpp-master   (--help for its options)
  worker  dpp-worker
  ctl     dppctl
  gen     dpp-gen
Any other first argument is run as a command.
USAGE
    exit 0
fi
cmd=$1
shift
case "$cmd" in
    master) exec /usr/local/bin/dpp-master "$@" ;;
    worker) exec /usr/local/bin/dpp-worker "$@" ;;
    ctl | dppctl) exec /usr/local/bin/dppctl "$@" ;;
    gen) exec /usr/local/bin/dpp-gen "$@" ;;
    *) exec "$cmd" "$@" ;;
esac
