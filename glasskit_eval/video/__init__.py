"""Video probing, exact frame selection and decoding (PyAV)."""
