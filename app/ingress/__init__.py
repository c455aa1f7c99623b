"""What arrives over HTTP before any room acts on it: which credential and how much body
each door asks for (`doors`), and the counter strangers' refusals go through (`sampling`)."""
