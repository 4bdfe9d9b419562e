"""Pod topology spread: the filter (DoNotSchedule) and the score (ScheduleAnyway)."""
