package coordtest

import "testing"

func runSimulation(t *testing.T, f Factory, o options) {}
