"""Small realistic PyTorch programs (``import torch``) that the coverage script scans and
``tests/compat/test_programs.py`` runs under dualflow with only their imports mapped."""
