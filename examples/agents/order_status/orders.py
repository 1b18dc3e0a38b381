"""The shop's orders (a stand-in for a database)."""

ORDERS: dict[str, dict[str, str]] = {
    "A17": {"order_id": "A17", "status": "shipped", "carrier": "DHL", "eta": "Tuesday"},
    "B42": {"order_id": "B42", "status": "packing", "carrier": "UPS", "eta": "Friday"},
}
