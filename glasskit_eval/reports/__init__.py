"""Reports: the console summary and the machine-readable JSON report."""
