#!/usr/bin/env bash
# Train on a Slurm cluster as a pre-emptible, requeueable batch job (docs/reliability.md, "On a cluster").
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 MAX_RESTARTS=3 SIGNAL_SECONDS=120 PORT=... \
#         SBATCH_ARGS=... SRUN_ARGS=...] tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py args...]
# Outside a job it submits itself with sbatch (--requeue, --signal=USR1@SIGNAL_SECONDS: Slurm's
# warning before the time limit or a pre-emption; output in slurm-JOBID.out) and prints the job id.
# In the job (or run inside an salloc allocation) srun starts one torchrun agent per node
# (`irtbox train --nproc GPUS_PER_NODE --nnodes N --rdzv-endpoint FIRST_NODE:PORT --max-restarts
# MAX_RESTARTS`): a dead worker restarts the group from the last checkpoint; on SIGUSR1 every
# rank saves one checkpoint and the job requeues itself; the requeued job resumes from it.
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 PARTITION JOB_NAME CONFIG [train.py args...]" >&2; exit 2; fi
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
if [ "$GPUS" -lt "$GPUS_PER_NODE" ]; then GPUS_PER_NODE=$GPUS; fi
NODES=$(( (GPUS + GPUS_PER_NODE - 1) / GPUS_PER_NODE ))
if [ -z "${SLURM_JOB_ID:-}" ]; then
  # SBATCH_ARGS is split into words on purpose: it holds several sbatch options.
  # shellcheck disable=SC2086
  exec sbatch --parsable -p "$1" --job-name="$2" --nodes="$NODES" --ntasks-per-node=1 \
      --gres=gpu:"$GPUS_PER_NODE" --cpus-per-task=$(( ${CPUS_PER_TASK:-5} * GPUS_PER_NODE )) \
      --requeue --signal=USR1@"${SIGNAL_SECONDS:-120}" --open-mode=append \
      --output=slurm-%j.out ${SBATCH_ARGS:-} "$0" "$@"
fi
# sed reads every name: `head -n1` would close the pipe early, and under pipefail the
# SIGPIPE of scontrol (a job of several nodes) would end this script with status 141.
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)
# The rendezvous port: PORT, else one of this job's own (irtbox.utils.cpus.job_port of step 0),
# so two jobs sharing a node do not collide on a fixed port.
PORT=${PORT:-$(( 15000 + (16 * SLURM_JOB_ID) % 15000 ))}
# --kill-on-bad-exit=1: a node whose agent gives up (its restarts spent) ends the other nodes' tasks,
# which would otherwise wait in a collective for the process group's timeout (hours on NCCL).
# shellcheck disable=SC2086
exec srun --nodes="${SLURM_NNODES:-$NODES}" --ntasks-per-node=1 --kill-on-bad-exit=1 ${SRUN_ARGS:-} \
    python -u -m irtbox train "$3" --nproc "$GPUS_PER_NODE" --nnodes "${SLURM_NNODES:-$NODES}" \
    --rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$SLURM_JOB_ID" \
    --max-restarts "${MAX_RESTARTS:-3}" "${@:4}"
