-- Reads the hold whose transition ends first (see holds_prelude.lua). Answer: its record.
return soonest()
