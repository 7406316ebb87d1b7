package server

// Clients returns the connections open now (INFO's connected_clients).
func (s *Server) Clients() int64 { return s.stats.connected.Load() }

// Commands returns the commands served so far (INFO's
// total_commands_processed).
func (s *Server) Commands() int64 { return s.stats.commands.Load() }

// Rejected returns the connections refused at MaxClients so far (INFO's
// rejected_connections).
func (s *Server) Rejected() int64 { return s.stats.rejected.Load() }
