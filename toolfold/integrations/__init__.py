"""Optional integrations with outside engines (each needs its extra); nothing in the core imports them."""
