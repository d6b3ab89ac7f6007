#!/bin/bash
# trainlaunch app 'torture' (roles: t x1); job dir: /shared/${app_id}
#SBATCH --job-name=torture
#SBATCH --output=/shared/%j/batch.log
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1

umask 077  # the job dir and trainlaunch's files in it are private (like the local store)

# Shared by every replica: rank 0 is the first node of the first role (this script's
# node), its rendezvous port a free one there, chosen now.
export TRAINLAUNCH_RANK0_HOST="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
export TRAINLAUNCH_RDZV_PORT="$(/usr/bin/python3 -m trainlaunch.node.freeport 2>/dev/null || echo $((20000 + SLURM_JOB_ID % 10000)))"
export TRAINLAUNCH_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"
export PYTHONUNBUFFERED=1
trainlaunch_job_dir=/shared/"$SLURM_JOB_ID"
echo "trainlaunch: job $SLURM_JOB_ID attempt $TRAINLAUNCH_RESTART_COUNT on $SLURM_JOB_NODELIST; rank 0 at $TRAINLAUNCH_RANK0_HOST:$TRAINLAUNCH_RDZV_PORT"
trainlaunch_term=0  # 1 once Slurm sent SIGTERM (requeue, preemption, limit, scancel)
trap 'trainlaunch_term=1; trainlaunch_sig=1' TERM
printf 'attempt=%s start=%s\n' "$TRAINLAUNCH_RESTART_COUNT" "${EPOCHREALTIME:-$(date +%s)}" >>"$trainlaunch_job_dir/attempts"
trainlaunch_pids=()

# Role 't': 1 replicas, one srun task each (replica id = task rank).
IFS= read -r -d '' trainlaunch_role_0 <<'EOF_ROLE_0' || true
trainlaunch_dir=/shared/"$SLURM_JOB_ID"/t/"$SLURM_PROCID"
export TRAINLAUNCH_REPLICA_LOG_DIR="$trainlaunch_dir"
export TRAINLAUNCH_APP_ID="$SLURM_JOB_ID"
export TRAINLAUNCH_HANDLE=slurm://trainlaunch/"$SLURM_JOB_ID"
export TRAINLAUNCH_ROLE=t
export TRAINLAUNCH_REPLICA_ID="$SLURM_PROCID"
export TRAINLAUNCH_NUM_REPLICAS=1
export ODD='$(touch /tmp/pwned)line1
line2naïve ☃ 日本'
export EMPTY=''
export APP=job-"$SLURM_JOB_ID"
trap : TERM  # outlive SIGTERM to record the exit code; the app still gets it
mkdir -p -- "$trainlaunch_dir" || exit 1
trainlaunch_status() {
    printf 'restart=%s host=%s start=%s%s\n' "$TRAINLAUNCH_RESTART_COUNT" "$SLURMD_NODENAME" "$trainlaunch_start" "$1" >"$trainlaunch_dir/replica.status.tmp" &&
        mv -f "$trainlaunch_dir/replica.status.tmp" "$trainlaunch_dir/replica.status"
}
trainlaunch_start="${EPOCHREALTIME:-$(date +%s)}"
trainlaunch_status ''
umask "${TRAINLAUNCH_USER_UMASK:-077}"  # files of the app itself: the user umask
trainlaunch_cmd=(python3 -c 'import sys; print(sys.argv)' 'two words' 'it'"'"'s' 'say "hi"' '$(touch /tmp/pwned)' '`id`' 'line1
line2' 'naïve ☃ 日本' '$HOME ${HOME}' 'back\slash' '' '*' --id="$SLURM_JOB_ID"/"$SLURM_PROCID" EOF_ROLE_0 a=b 'tab	here' '~' '!!' '#not a comment')
trainlaunch_python=/usr/bin/python3
if command -v "$trainlaunch_python" >/dev/null; then  # both streams in arrival order
    "$trainlaunch_python" -m trainlaunch.schedulers.slurm.replica "$trainlaunch_dir" "${trainlaunch_cmd[@]}"
else  # no such python on this node: stdout.log and stderr.log only
    "${trainlaunch_cmd[@]}" >>"$trainlaunch_dir/stdout.log" 2>>"$trainlaunch_dir/stderr.log"
fi
trainlaunch_rc=$?
umask 077
trainlaunch_status " exit=$trainlaunch_rc end=${EPOCHREALTIME:-$(date +%s)}"
exit "$trainlaunch_rc"
EOF_ROLE_0
# its tasks read it from a private file, never from their command line (ps, sacct)
printf '%s' "$trainlaunch_role_0" >"$trainlaunch_job_dir/.role0.sh.tmp" &&
    mv -f "$trainlaunch_job_dir/.role0.sh.tmp" "$trainlaunch_job_dir/.role0.sh"
srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=1 --kill-on-bad-exit=1 bash "$trainlaunch_job_dir/.role0.sh" &
trainlaunch_pids+=($!)

# Wait for every role; the first failure stops the others.
trainlaunch_rc=0
trainlaunch_running=${#trainlaunch_pids[@]}
while [ "$trainlaunch_running" -gt 0 ]; do
    trainlaunch_sig=0
    wait -n
    rc=$?
    [ "$trainlaunch_sig" -eq 1 ] && continue  # a trapped signal ended the wait
    trainlaunch_running=$((trainlaunch_running - 1))
    if [ "$rc" -ne 0 ] && [ "$trainlaunch_rc" -eq 0 ]; then
        trainlaunch_rc=$rc
        kill "${trainlaunch_pids[@]}" 2>/dev/null
    fi
done

# Requeue after a rank saved and exited 75, or retry a failure.
trainlaunch_requeues=$(grep -c ' action=requeue' "$trainlaunch_job_dir/attempts")
trainlaunch_retries=$(grep -c ' action=retry' "$trainlaunch_job_dir/attempts")
trainlaunch_action=end
if [ "$trainlaunch_term" -eq 0 ] && [ ! -e "$trainlaunch_job_dir/.interrupted" ]; then  # else Slurm requeues or ends the job itself, or Ctrl-C ended it
    if [ "$trainlaunch_rc" -eq 75 ] && [ "$trainlaunch_requeues" -lt 3 ]; then
        trainlaunch_action=requeue trainlaunch_n="$((trainlaunch_requeues + 1)) of 3"
    elif [ "$trainlaunch_rc" -ne 0 ] && [ "$trainlaunch_rc" -ne 75 ] && [ "$trainlaunch_retries" -lt 0 ]; then
        trainlaunch_action=retry trainlaunch_n="$((trainlaunch_retries + 1)) of 0"
    fi
fi
printf 'attempt=%s end=%s exit=%s action=%s term=%s left=%s\n' "$TRAINLAUNCH_RESTART_COUNT" "${EPOCHREALTIME:-$(date +%s)}" "$trainlaunch_rc" "$trainlaunch_action" "$trainlaunch_term" "$(squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null)" >>"$trainlaunch_job_dir/attempts"
if [ "$trainlaunch_action" != end ]; then
    echo "trainlaunch: exit code $trainlaunch_rc; requeueing ($trainlaunch_action $trainlaunch_n)"
    scontrol requeue "$SLURM_JOB_ID" && exit "$trainlaunch_rc"
fi
# The result, unless Slurm ended the job (scancel, time limit): Slurm says how then.
if [ "$trainlaunch_term" -eq 0 ]; then
    printf 'restart=%s exit=%s end=%s\n' "$TRAINLAUNCH_RESTART_COUNT" "$trainlaunch_rc" "${EPOCHREALTIME:-$(date +%s)}" >"$trainlaunch_job_dir/result.tmp" &&
        mv -f "$trainlaunch_job_dir/result.tmp" "$trainlaunch_job_dir/result"
fi
echo "trainlaunch: exit code $trainlaunch_rc"
exit "$trainlaunch_rc"
