"""The Slurm backend: sbatch/squeue/sacct/scancel (backend), pure rendering, state parsing."""
