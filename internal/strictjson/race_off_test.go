//go:build !race

package strictjson_test

const raceOn = false
