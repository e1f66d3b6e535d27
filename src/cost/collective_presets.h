// The GPU presets' collective tables, row by row from published measurements (docs/cost-model.md,
// "Collective costs", lists every row, its source and what it was inferred from).
#pragma once

#include "cost/collective_table.h"

namespace infinipipe::cost {

// A800 SXM nodes of 8 (NVLink 400 GB/s), 400 Gb/s InfiniBand per node: the InfiniPipe paper's.
CollectiveTable a800_collectives();
// H100 / H200 SXM nodes of 8 (NVLink 900 GB/s), a 400 Gb/s NDR NIC per GPU.
CollectiveTable hopper_collectives();

}  // namespace infinipipe::cost
