"""The shipped store contract (``persistence.testing``) on every backend of ``conftest.BACKENDS``."""

from __future__ import annotations

import pytest

from persistence.testing import ContractSettings, StoreContract


class TestStoreContract(StoreContract):
    """``store_factory`` is conftest's, parametrised over every backend."""

    @pytest.fixture
    def contract_settings(self, request: pytest.FixtureRequest) -> ContractSettings:
        backend = request.node.callspec.params["store_factory"]
        if backend == "memory":  # one process's dictionary: nothing to share with another process
            return ContractSettings(processes=0, state_machine_examples=60)
        if backend.startswith("dynamodb"):  # a round trip of ~2 ms to a JVM: fewer rounds and examples
            return ContractSettings(rounds=50, state_machine_examples=20)
        return ContractSettings(state_machine_examples=60)
