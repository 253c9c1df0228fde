"""The Sweep page (sweep.py): one pass against tokens per pass, and a batch x depth grid."""
