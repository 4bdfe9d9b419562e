"""The bind verb for a single pod: re-validate it, reserve its node, create the Binding.

Knows nothing of gangs: extenders.gang builds its Permit (members held until their gang can go)
on ``Binder`` (extenders.binding.binder).
"""
