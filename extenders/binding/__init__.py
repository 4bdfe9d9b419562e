"""The bind verb: reserve and bind a plain pod at once; hold a gang member until its gang can go.

``BindService`` (extenders.binding.service) is what the HTTP layer wires in.
"""
