#!/usr/bin/env bash
# Starts mpi_rank.cpp's ranks as one job and checks their logs together
# (tests/CMakeLists.txt registers each use as a test labelled "mpi"):
#
#   mpi_test.sh PROGRAM MPIEXEC WORK_DIR mpirun NP SOURCE [options]
#       NP ranks under mpirun, one MPI_Allreduce per step
#   mpi_test.sh PROGRAM MPIEXEC WORK_DIR torchrun NP SOURCE [options]
#       NP plain processes with torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
#   mpi_test.sh PROGRAM MPIEXEC WORK_DIR slurm NODES TASKS_PER_NODE SOURCE [options]
#       NODES x TASKS_PER_NODE plain processes with an srun step's SLURM_* variables
#   mpi_test.sh PROGRAM MPIEXEC WORK_DIR elastic
#       4 ranks, SIGKILLed at step 12; 3 ranks restored from their states,
#       SIGKILLed at step 30; 2 ranks restored from those, to the end
#
# SOURCE is range (range(n)) or tfrecord (an indexed TFRecord set written
# here); the options go to the ranks and to the checker (mpi_rank.cpp's
# header). Every launch has a time limit, so a hung rank fails the test. The
# work directory is removed when the test passes.
set -euo pipefail
program=$1 mpiexec=$2 work=$3 kind=$4
shift 4
n=2003  # n % 4 = 3, n % 2 = 1: every policy has a remainder to deal with

rm -rf "$work"
mkdir -p "$work"
"$program" data "$work/data" "$n"

# mpirun on this machine only: shared memory between the ranks and loopback
# for the launcher's own connections; more ranks than cores; root only where
# the tests run as root.
mpirun=(timeout 60 "$mpiexec" --oversubscribe --mca btl self,vader
        --mca oob_tcp_if_include lo)
if [[ $(id -u) == 0 ]]; then mpirun+=(--allow-run-as-root); fi
# Plain processes see no other launcher's variables.
clean_env=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE
           -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_LOCAL_RANK
           -u OMPI_COMM_WORLD_LOCAL_SIZE -u PMI_RANK -u PMI_SIZE
           -u SLURM_PROCID -u SLURM_STEP_NUM_TASKS -u SLURM_LOCALID -u SLURM_NODEID
           -u SLURM_STEP_TASKS_PER_NODE -u SLURM_TASKS_PER_NODE -u SLURM_NTASKS_PER_NODE)

source_options() {
  case $1 in
    range) ;;
    tfrecord) echo "--data $work/data" ;;
    *) echo "mpi_test.sh: source $1: range or tfrecord" >&2; exit 2 ;;
  esac
}

# Waits for the background processes $@; fails if any failed.
wait_all() {
  local status=0 pid
  for pid in "$@"; do wait "$pid" || status=1; done
  if ((status)); then echo "mpi_test.sh: a rank failed" >&2; exit 1; fi
}

case $kind in
  mpirun)
    np=$1
    read -ra data <<<"$(source_options "$2")"
    shift 2
    "${mpirun[@]}" -np "$np" "$program" run "$work/out" --n "$n" "${data[@]}" "$@"
    "$program" check "$work/out" --n "$n" "$@" --world "$np" --launcher openmpi
    ;;
  torchrun)
    np=$1
    read -ra data <<<"$(source_options "$2")"
    shift 2
    pids=()
    for ((r = 0; r < np; ++r)); do
      "${clean_env[@]}" RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r LOCAL_WORLD_SIZE=$np \
        timeout 60 "$program" run "$work/out" --n "$n" "${data[@]}" "$@" --sync none &
      pids+=($!)
    done
    wait_all "${pids[@]}"
    "$program" check "$work/out" --n "$n" "$@" --world "$np" --launcher torchrun --local-size "$np"
    ;;
  slurm)
    nodes=$1 per_node=$2
    read -ra data <<<"$(source_options "$3")"
    shift 3
    np=$((nodes * per_node))
    pids=()
    for ((r = 0; r < np; ++r)); do
      # As srun sets them in a step of NODES nodes with TASKS_PER_NODE tasks each.
      "${clean_env[@]}" SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_NTASKS=$np SLURM_PROCID=$r \
        SLURM_STEP_NUM_TASKS=$np SLURM_LOCALID=$((r % per_node)) SLURM_NODEID=$((r / per_node)) \
        SLURM_STEP_TASKS_PER_NODE="$per_node(x$nodes)" SLURM_TASKS_PER_NODE="$per_node(x$nodes)" \
        timeout 60 "$program" run "$work/out" --n "$n" "${data[@]}" "$@" --sync none &
      pids+=($!)
    done
    wait_all "${pids[@]}"
    "$program" check "$work/out" --n "$n" "$@" --world "$np" --launcher slurm \
      --local-size "$per_node"
    ;;
  elastic)
    options=(--n "$n" --data "$work/data" --policy uneven --filter mod7)
    # killed RUN STEP RANK COMMAND...: the run must end by RANK's SIGKILL
    # after it saved STEP (mpirun then ends the job): not finish, not hang
    # (timeout's 124), not fail before.
    killed() {
      local run=$1 step=$2 rank=$3 rc=0
      shift 3
      "$@" "${options[@]}" --kill-at "$step" --kill-rank "$rank" || rc=$?
      if ((rc == 0)); then echo "mpi_test.sh: run $run was not killed" >&2; exit 1; fi
      if ((rc == 124)); then echo "mpi_test.sh: run $run hung" >&2; exit 1; fi
      if [[ ! -f $work/run-$run/rank-$rank.step-$step.state ]]; then
        echo "mpi_test.sh: run $run failed before rank $rank saved step $step" >&2
        exit 1
      fi
      echo "mpi_test.sh: run $run killed at step $step (mpirun exit status $rc)"
    }
    killed 1 12 2 "${mpirun[@]}" -np 4 "$program" elastic "$work" 1
    killed 2 30 1 "${mpirun[@]}" -np 3 "$program" elastic "$work" 2 --old-world 4
    "${mpirun[@]}" -np 2 "$program" elastic "$work" 3 "${options[@]}" --old-world 3
    "$program" check-elastic "$work" 3 "${options[@]}"
    ;;
  *)
    echo "mpi_test.sh: $kind: mpirun, torchrun, slurm or elastic" >&2
    exit 2
    ;;
esac
rm -rf "$work"
