#!/bin/bash
# Slurm submission of a data-parallel fgm run (docs/distributed.md).
# The store is ingested once, on a file system every node mounts, with a
# partition count that the rank count divides (here 64 partitions, 16 ranks:
# 4 partitions per rank; 8, 32 or 64 ranks give the same model bit for bit).
#
#   fgm ingest kddb.bz2 --out /shared/kddb-p64 --partitions 64 --memory-budget 8GB
#   sbatch configs/slurm-example.sh
#
#SBATCH --job-name=fgm-train
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --mem-per-cpu=2G
#SBATCH --time=02:00:00
set -euo pipefail

# engine.memory_budget is per rank: leave room for the stream buffers. A
# scoring pass by column ranges holds 16 bytes per non-empty column of the
# rank's partitions and about 8*m/K of its own column range
# (docs/distributed.md, "Cost model"); a multi-class store adds its classes'
# row state (25 bytes per row and class) for the shared passes.
# engine.threads: the cores of one task; the model does not depend on it.
# srun needs --cpus-per-task itself (Slurm >= 22.05 no longer passes the
# sbatch value on) to give each task that many cores; fgm warns (run.json
# warnings, threads_exceed_cpu_affinity) when a rank may run on fewer CPUs
# than engine.threads.
srun --mpi=pmix --cpus-per-task="${SLURM_CPUS_PER_TASK}" fgm train --config nightly.toml \
  data.train=/shared/kddb-p64 \
  engine.threads="${SLURM_CPUS_PER_TASK}" \
  engine.memory_budget=12GB \
  output.dir="runs/${SLURM_JOB_ID}"
# Without srun's PMIx plugin, Open MPI reads the allocation; it binds each rank
# to ONE core by default, so give each rank its cores (or --bind-to none):
#   mpirun -np "${SLURM_NTASKS}" --map-by slot:PE="${SLURM_CPUS_PER_TASK}" fgm train ... \
#     engine.threads="${SLURM_CPUS_PER_TASK}"
