#!/bin/sh
# as-nodes.sh RANKS_PER_NODE PROGRAM ARGS...: runs PROGRAM as if every RANKS_PER_NODE
# consecutive ranks shared a node, by naming this rank's node for the hybrid transport
# (TETHER_NODE_NAME). Ranks named alike use shared memory, others the network.
# Needs PMIX_RANK, which every PMIx launcher sets.
per_node=$1
shift
[ -n "$PMIX_RANK" ] || { echo "as-nodes.sh: PMIX_RANK is not set: run me under tether-run or mpirun" >&2; exit 2; }
TETHER_NODE_NAME="node$((PMIX_RANK / per_node))"
export TETHER_NODE_NAME
exec "$@"
