"""What leaves and enters a store whole: export and import as JSON Lines,
trajectories and backups (transfer), and the report page (report)."""
