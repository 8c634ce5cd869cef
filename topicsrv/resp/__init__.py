"""The RESP front: Redis protocol (RESP2/RESP3) over the shared engine (API.md section 9)."""
