"""The mock ledger: vocabulary tables, chain tokens, and the engine that answers one call with 52 bytes."""
