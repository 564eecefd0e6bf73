package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every Herald configuration kind.
var GroupVersion = schema.GroupVersion{Group: "herald.dev", Version: "v1beta1"}

var (
	// SchemeBuilder registers the Herald kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the Herald kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&IPAddressPool{}, &IPAddressPoolList{},
		&L2Advertisement{}, &L2AdvertisementList{},
		&BGPAdvertisement{}, &BGPAdvertisementList{},
		&BGPPeer{}, &BGPPeerList{},
		&Community{}, &CommunityList{},
		&BFDProfile{}, &BFDProfileList{},
		&ServiceL2Status{}, &ServiceL2StatusList{},
		&ServiceBGPStatus{}, &ServiceBGPStatusList{},
		&SpeakerStatus{}, &SpeakerStatusList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
