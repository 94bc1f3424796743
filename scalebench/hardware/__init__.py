"""Facts about devices: resolving auto/cpu/cuda and threads, the environment fingerprint, the
measured peak and vendors' datasheet peaks. Imports spec only."""
