"""The operator list and its builders: analytic transformer builders, the meta-device tracer,
and passes (fusion, FlashAttention)."""
