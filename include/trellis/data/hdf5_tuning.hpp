// Hdf5Tuning: every knob of how Trellis talks to HDF5 / MPI-IO, in one place, and the property
// lists built from it. Defaults suit a laptop and a parallel file system alike; sites tune
// the MPI-IO hints (Lustre striping, aggregators) without touching the readers.
#pragma once

#include "trellis/data/hdf5.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

struct Hdf5Tuning {
  // --- raw data transfer -------------------------------------------------------------------
  // false: independent H5Dread (default). Ranks read different samples, often of different
  //   shards, so nothing has to be matched across ranks.
  // true: collective H5Dread (MPI-IO two-phase I/O). SampleDataset::read() then becomes a
  //   collective call over the open communicator: every rank must call it the same number of
  //   times (an empty index list is fine), and each call issues one H5Dread per shard on every
  //   rank, with an empty selection for shards the rank does not touch. Pays off on parallel
  //   file systems with many ranks reading small scattered rows.
  bool collective_transfer = false;

  // true: open with HDF5's POSIX (sec2) driver instead of MPI-IO. Every rank opens the files
  //   on its own and read() makes no MPI call at all, so a background loader thread may call
  //   it while the main thread communicates (Trellis initialises MPI_THREAD_FUNNELED: only the
  //   main thread may call MPI). Read-only, independent; excludes collective_transfer.
  bool posix_reads = false;

  // How scattered rows of one shard are read with independent transfer:
  // false (default): one H5Dread per run of consecutive rows, each a single hyperslab block.
  // true: one H5Dread per shard over the union (H5S_SELECT_OR) of all its runs' blocks.
  // Collective transfer always reads one union per shard (all ranks must make the same
  // calls). HDF5 1.10.8 intersects an irregular union with every chunk slowly: a shuffled
  // Fashion-MNIST epoch (256-row batches, MPI-IO driver, file in the page cache) takes
  // 3.5-4.5 s as unions and 0.5-0.65 s as per-run reads. The union may still pay off with
  // collective transfer on a parallel file system, where MPI-IO can aggregate it.
  bool one_read_per_shard = false;

  // --- metadata ----------------------------------------------------------------------------
  // H5Pset_all_coll_metadata_ops: one rank reads object headers and broadcasts them. HDF5
  // requires every metadata read of the file to be collective then, and chunk-index lookups
  // inside H5Dread are metadata reads, so this is only allowed with collective_transfer
  // (open() checks). Off by default: HDF5 <= 1.10.8 also mishandles the flag around chunk
  // lookups (HDFGroup/hdf5#1173, #1206).
  bool collective_metadata_reads = false;

  // --- MPI-IO hints (MPI_Info passed to H5Pset_fapl_mpio); 0 / empty = the MPI default ------
  std::int64_t cb_buffer_size = 0;  // "cb_buffer_size": bytes per collective-buffering aggregator
  int cb_nodes = 0;                 // "cb_nodes": number of aggregators
  std::vector<std::pair<std::string, std::string>> extra_hints;  // e.g. {"striping_factor", "8"}

  // --- chunk cache, per open dataset and rank (read-only files only; H5Pset_chunk_cache) ----
  // Off by default. A cache that holds the whole dataset helps a little (shuffled
  // Fashion-MNIST epoch 0.50 s instead of 0.65 s), but one that holds only part of it thrashes
  // (2.1 s with 32 MiB for the 47 MB set), and on data larger than memory every random row
  // would pull its whole chunk (1024 rows) from the file system. Without it HDF5 reads just
  // the selected rows. Raise it for datasets that fit: bytes >= the shard's /samples size.
  std::size_t chunk_cache_bytes = 0;
  std::size_t chunk_cache_slots = 12421;  // a prime, ~100x the chunks that fit, as HDF5 advises

  // --- writing (write_sample_file) ---------------------------------------------------------
  std::int64_t chunk_rows = 1024;  // rows of /samples and /labels per chunk
  // H5Pset_alignment: objects of >= alignment_threshold bytes start at a multiple of
  // alignment (e.g. the Lustre stripe size); alignment 1 = off.
  std::uint64_t alignment_threshold = 0;
  std::uint64_t alignment = 1;
};

// File access list for reading on `comm` with the MPI-IO driver (H5Pset_fapl_mpio) and the
// hints above. Opening with it is collective over comm. With posix_reads: the sec2 driver,
// and opening is local to the rank.
// Throws ConfigError for a combination HDF5 cannot honour (collective metadata reads need
// collective transfers).
void check_tuning(const Hdf5Tuning& tuning);

H5Plist make_parallel_file_access(MPI_Comm comm, const Hdf5Tuning& tuning);

// Dataset access list with the chunk cache above.
H5Plist make_dataset_access(const Hdf5Tuning& tuning);

// Transfer list for H5Dread: independent or collective as tuning.collective_transfer says.
H5Plist make_transfer(const Hdf5Tuning& tuning);

// File access list for a serial writer (default sec2 driver) with tuning's alignment.
H5Plist make_serial_file_access(const Hdf5Tuning& tuning);

}  // namespace trellis
