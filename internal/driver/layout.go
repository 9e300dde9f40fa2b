package driver

import (
	"fmt"
	"os"
)

// LayoutSetting names the setting that makes a driver behave as one whose stream and event
// layout cannot be learned (StreamCheck and EventCheck answer ErrorNotSupported, and
// StreamMemory and EventMemory are not OK), so that what streambridge does on such a
// driver is tested on every driver, the real one included: "unlearnable", or unset.
const LayoutSetting = "STREAMBRIDGE_LAYOUT"

// Unlearnable reports whether LayoutSetting says the layout cannot be learned; any value
// other than "" and "unlearnable" is an error naming the setting.
func Unlearnable() (bool, error) {
	switch v := os.Getenv(LayoutSetting); v {
	case "":
		return false, nil
	case "unlearnable":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want \"unlearnable\" (a test's: the driver's layout is taken as one that cannot be learned) or nothing", LayoutSetting, v)
	}
}
