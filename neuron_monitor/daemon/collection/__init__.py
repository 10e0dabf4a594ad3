"""The parts the scheduler's Collector is made of: the group instances, the applications, the report assembly."""
