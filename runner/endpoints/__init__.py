"""Client endpoints (CBT's client_endpoints): what fio runs against on each client."""
