"""What the tests share: helpers, reference implementations, test doubles and the tiers' rule."""
