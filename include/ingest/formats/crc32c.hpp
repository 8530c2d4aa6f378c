// CRC-32C for the formats layer: the implementation lives in core/crc32c.hpp
// (checkpoint states use it too); this header keeps the formats' include path.
#pragma once

#include "ingest/core/crc32c.hpp"
