"""Structured outcome logs and EMF metrics."""
