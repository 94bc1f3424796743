"""Facts about devices: resolving auto/cpu/cuda and threads, the environment fingerprint, the
node's topology and each worker's placement, energy counters (NVML, RAPL), the measured peak and
vendors' datasheet peaks. Imports spec only."""
