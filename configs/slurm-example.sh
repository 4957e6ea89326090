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
# scoring pass holds 8*m*(P/K + K + 2) bytes of score vectors per rank
# (docs/distributed.md, "Cost model"): 5.3 GB for kddb's 29.9M features with
# 64 partitions on 16 ranks, growing with K (more ranks need more memory each
# until the column-range reduction planned there is built).
# engine.threads: the cores of one task; the model does not depend on it.
srun --mpi=pmix fgm train --config nightly.toml \
  data.train=/shared/kddb-p64 \
  engine.threads="${SLURM_CPUS_PER_TASK}" \
  engine.memory_budget=12GB \
  output.dir="runs/${SLURM_JOB_ID}"
# Without srun's PMIx plugin: mpirun -np "${SLURM_NTASKS}" fgm train ... (Open MPI reads the allocation).
