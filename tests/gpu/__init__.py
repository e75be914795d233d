"""GPU tests: every test here is marked ``gpu`` and skips without cupy and a CUDA device."""
