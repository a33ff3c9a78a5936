"""The operations tier: what runs and checks irtbox rather than being it. Preparing and checking
datasets (:mod:`.prepare`), miniatures (:mod:`.miniature`), rehearsals (:mod:`.miniaturize`,
:mod:`.rehearse`, :mod:`.rehearsal_kinds`, :mod:`.rehearsal_probe`), sweeps (:mod:`.sweeps`),
config checking (:mod:`.config_check`) and the command lines they start (:mod:`.commands`).
Only :mod:`irtbox.cli` imports it (tests/test_layering.py)."""
__all__ = []
